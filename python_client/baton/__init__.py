"""Python client for Baton, a disaggregated LLM serving runtime."""
