"""Tests of the synthetic qwen35 test models (generator.testmodel, make-test-model)."""
