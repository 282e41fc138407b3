"""Ceilings: the fastest a placement can run. Decode is bound by bytes read per token (``decode``), prefill by
FLOPs per prompt token (``prefill``); ``offload`` says where each weight sits and what a token reads on each side."""
