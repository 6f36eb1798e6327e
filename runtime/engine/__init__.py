"""Protocol logic without sockets: the spec state machines (``machine``) and request
correlation (``correlation``: one future per request, found again by its answer's key)."""
