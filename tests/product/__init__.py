"""Tests of the product around the server: config, CLI, admin API, client."""
