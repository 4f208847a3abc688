"""What a grading says to its readers: results.json, the terminal's table, the HTML report, a batch's
class pages, and Gradescope's autograder."""
