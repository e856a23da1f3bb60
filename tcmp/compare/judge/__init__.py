"""Stage 3, judge: takes a `Pair` and its tensors (or their summaries) and gives a `Row`: the metrics of the data
mode (tensor, statistics, md5) and the verdict (PASS, FAIL, …) under the thresholds."""
