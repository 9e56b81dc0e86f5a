"""Side by side: one question, two to six agents running concurrently, saved comparisons."""
