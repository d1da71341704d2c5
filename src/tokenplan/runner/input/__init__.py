"""Input: the rows of the input files (plain, compressed, JSON arrays, Parquet), each checked and given its id."""
