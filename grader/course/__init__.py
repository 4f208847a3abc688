"""Grading a class, and what a course runs around the grade (the staff guide is docs/staff.md).

batch.py grades a class on Dask; intake.py finds each student's submission in one folder, with
archives.py unpacking archives as hostile input; gradebook.py keeps one row per graded submission;
salt.py reads the course's secret; release.py builds the student bundle.

Around the grade, one course file, `course.toml`: config.py reads it; late.py finds submission times
and prices lateness; overrides.py keeps a TA's manual adjustments in the gradebook; adjustments.py
turns both into each student's adjustments; similarity.py reviews the class for copies (copydetect);
leaderboard.py ranks timed results per GPU model under pseudonyms; canvas.py writes a CSV for
Canvas's gradebook import; outputs.py hands the batch what these add to its outputs.
"""
