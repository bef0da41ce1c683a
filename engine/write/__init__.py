"""The write path: the driver pipeline that turns input into one deltacommit, executor-side log writing."""
