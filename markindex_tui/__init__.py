"""markindex terminal app."""
