"""What the generated Spark modules share (``rows``); importing ``rows`` needs pyspark and
pyarrow (the spark extra)."""
