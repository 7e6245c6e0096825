"""`python -m relaymq_spark JOB ...` (also the script `spark-submit` runs)."""

from relaymq_spark.cli import spark

if __name__ == "__main__":
    spark(prog_name="python -m relaymq_spark")
