"""Tests of toolkits/fs, one file per module."""
