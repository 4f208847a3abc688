"""What a course runs around the grade (the staff guide in docs/, not shipped to students): one course
file, `course.toml`, and what the batch does with it.

config.py reads course.toml; late.py finds submission times and prices lateness; overrides.py keeps a
TA's manual adjustments in the gradebook; adjustments.py turns both into each student's adjustments;
similarity.py reviews the class for copies (copydetect); leaderboard.py ranks timed results per GPU
model under pseudonyms; canvas.py writes a CSV for Canvas's gradebook import; outputs.py hands the
batch what these add to its outputs.
"""
