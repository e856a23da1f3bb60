"""Stage 1, collect: takes the two dump paths (and the index, the graph files) and gives `CompareInputs`: both dump
trees read into directories, each bound to its graph and model (`Binding`), the golden's kind, and every item
that cannot be read or bound, said why."""
