"""What a run leaves in OUTPUT and how it is read back."""
