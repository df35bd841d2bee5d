//! NVIDIA GPUs (issue 9): device query, ceilings, ncu import, instruction roofline.
