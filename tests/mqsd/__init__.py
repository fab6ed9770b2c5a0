"""Tests of MS-MQSD and of the discover/directory CLI commands."""
