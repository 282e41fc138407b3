"""What a surface shows for a model on a hardware profile, decided once and Qt-free: pure views with ``text()`` and
``to_json_dict()`` that ``gguf-bench predict`` prints and the window renders (as ``choose/verdicts.py`` and
``compare/figures.py`` are for theirs). A view asks ``app.predict.questions`` what to predict and
``app.predict.answer`` for each figure; it never builds prediction settings or figures of its own."""
