"""Native builds: llama.cpp's shared libraries and the MTP wrapper, per platform."""
