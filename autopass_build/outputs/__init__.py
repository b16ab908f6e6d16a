"""What a run leaves for people and for the next build: the report and its figures,
verify (two clean tuned builds identical, then the A/B), status (how much of a database
applies to today's source) and retrain (`apply --train`: the profiles trained again
inside the user's build)."""
