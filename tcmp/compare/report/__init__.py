"""Stage 4, report: takes the rows and unmatched items of each rank and gives the result files — the CSV and the
unmatched CSV, the summary JSON, the xlsx, the HTML page — and the console's lines; `outcome` holds the records of a
finished compare (counts, first divergences, results per rank) and `table` the cells every report shares."""
