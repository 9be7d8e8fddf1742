"""Tests of trainguard inside training frameworks (real libraries, CPU)."""
