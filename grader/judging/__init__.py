"""The parent's judgement of what a child reported: each output against the float64 reference
(numerics, locate, diagnosis, poison), whose work it was (integrity, ops), the timing verdicts
(verdicts, speed, steadiness), and every reason code a verdict gives (reasons)."""
