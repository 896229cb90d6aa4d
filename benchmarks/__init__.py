"""Benchmarks: streamfold against the floor and the libraries users would pick instead."""
