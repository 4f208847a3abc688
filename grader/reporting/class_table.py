"""The class's grades as a TA reads them after `batch`: one scale for every student, and a row each.

Every student is graded out of the same points: the class's `Scale` (bonus points come on top and
count in the total, as grades.csv counts them). The terminal's table has a row per student with
each assignment's points where the terminal is wide enough, and the total and the bonus in it
always; grades.csv and the class page have every column.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from grader.reporting import fitting
from grader.reporting.fitting import Column
from grader.reporting.results import Grade, possible
from grader.reporting.terminal import plain
from grader.running import sandbox, stack


@dataclass(frozen=True)
class Scale:
    """What every student of the class is graded out of."""

    most: float  # the points a complete submission can earn, bonus apart: the "of" of every total
    bonus: float  # bonus points on top
    by_assignment: dict[str, float]  # each assignment's points, bonus apart
    not_graded: float  # at most this many of `most` need a GPU and were not graded here (CPU tier)

    @classmethod
    def of(cls, grades: dict[str, Grade], assignments: list) -> Scale:
        """The class's scale, from its students' tests: the most any student's grade holds (one whose
        archive was refused holds fewer tests), so it is the same for every row."""
        def most(pick) -> float:  # rounded as results.json rounds: sums of shares differ in the last bits
            return round(max((pick(g) for g in grades.values()), default=0.0), 4)

        by_assignment = {a.name: most(lambda g, a=a: possible([t for t in g.tests if t.assignment == a.name]))
                         for a in assignments}  # fmt: skip
        return cls(most(lambda g: g.max_score), most(lambda g: sum(t.max_score for t in g.tests if t.bonus)),
                   by_assignment, most(lambda g: g.max_score - g.graded_max_score))  # fmt: skip

    def words(self) -> str:
        """The scale in a sentence, for the table's title and the class page."""
        text = f"points of {self.most:.2f}"
        if self.bonus:
            text += f"; bonus points (up to {self.bonus:.2f}) come on top and count in the total"
        if self.not_graded:
            text += f"; up to {self.not_graded:.2f} points need a GPU and were not graded on this tier"
        return text


def rows(grades: dict[str, Grade], assignments: list) -> list[list[Text | str]]:
    """Per student: each assignment's points (adjustments included, as in grades.csv), the total
    and the bonus part of it."""
    found = []
    for student, grade in grades.items():
        points = [grade.assignment_score(a.name) for a in assignments]
        found.append([plain(student), *(f"{p:.2f}" for p in points), plain(f"{sum(points):.2f}", "bold"),
                      f"{grade.bonus_score:.2f}"])  # fmt: skip
    return found


def print_class_table(grades: dict[str, Grade], assignments: list, console: Console) -> None:
    """A row per student, with each assignment's points where they all fit without breaking a word
    (assignments have long names), else the totals alone; then the warnings every report carries."""
    scale = Scale.of(grades, assignments)
    console.print(plain(f"Class grades ({len(grades)} students): {scale.words()}."), highlight=False)
    found = rows(grades, assignments)
    names = [Column(a.name, numbers=True) for a in assignments]
    ends = [Column("total", numbers=True), Column("bonus", numbers=True)]
    table = fitting.fitted([Column("student"), *names, *ends], found, console.width)
    apart = table is None  # the totals alone: the columns of a total are all or none
    if apart:
        table = fitting.fitted([Column("student"), *ends], [[row[0], *row[-2:]] for row in found], console.width)
    if table is not None:
        console.print(table)
    else:  # narrower than any table: a line per student
        for row in found:
            console.print(plain(f"{row[0]}: total {row[-2]}, bonus {row[-1]}"), highlight=False)
    if apart:
        console.print(plain("Each assignment's points: grades.csv and summary.html."), highlight=False)
    environment = next(iter(grades.values())).environment if grades else {}
    for warning in (stack.warning(environment), sandbox.warning(environment)):
        if warning:
            console.print(Text(warning, style="bold red"))
