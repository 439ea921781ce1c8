"""Spark integration for lakemerge (everything that imports pyspark lives in this package).

The Spark data source, bucket-parallel writer and compaction jobs arrive with the Spark issue; engine and kernels
never import pyspark.
"""
