"""What a run leaves: the record summarized from its ranks (summary), the files of its output
directory and the checkpoint a later run resumes (resume), a sweep's report (report,
python -m rn50.report) and the comparison of two sets of runs (compare, python -m rn50.compare)."""
