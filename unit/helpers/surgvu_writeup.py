"""The write-up's printed evaluation (../shared/seeds/003_5891c92521c05e8e.txt), shared by the BLEU
unit tests and the end-to-end surgvqa tests: the question, its five references and the numbers the
challenge's evaluator printed for the candidate "no"."""

QUESTION = "Was a large needle driver used during the surgery?"
REFERENCES = [
    "No",
    "No, a large needle driver was not used.",
    "A large needle driver was not used.",
    "No large needle driver was utilized.",
    "There is no indication a large needle driver was used.",
]
PRINTED_SCORES = [
    0.1778279410038923,
    0.00016215809237314185,
    0,
    0.0011981952414407235,
    2.1945711360427958e-05,
]
PRINTED_MAX = 0.1778279410038923
PRINTED_MEAN = 0.11855196066926153  # the write-up's aggregate of [0, PRINTED_MAX, PRINTED_MAX]
