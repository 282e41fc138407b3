"""This machine's fit: what this machine achieves, learned from its own measured rows. ``fitted_model`` holds the
time model's form and bands, ``workload`` its regressors, ``calibration_fit`` and ``calibration_store`` the fit per
backend and where it lives, ``store_efficiency`` and ``crossing_fit`` what stored runs and split runs teach,
``split_expected`` a split placement's figure composed from its two sides."""
