"""A tuning run: the stages chosen first (stage_choice), the steps on top
(steps_on_top), the per-file search over a knob space (space, decision_knobs,
searching, strategies/, agents/, screen), every measurement journaled (measuring,
journal), the winners composed and verified (composite, conclude, rivals) and published
to the flags database (publish); tuner runs it all within its clock."""
