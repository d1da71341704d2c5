"""Every file format tokenplan reads or writes for the user: the job YAML and calibration JSON
(``job``), measurement CSVs (``measurements``) and other tools' bench results
(``bench_results``). Each is read once, validated, and its errors are one line naming the file
and the field."""
