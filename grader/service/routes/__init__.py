"""The service's routers, one per resource: submissions (the API), reports, the student's pages,
the leaderboard and the class page."""
