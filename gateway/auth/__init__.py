"""Who the caller is and what each role may see."""
