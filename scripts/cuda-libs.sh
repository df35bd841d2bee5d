# Sourced by the GPU-host scripts: make libcublasLt loadable by cudarc, which looks for
# libcublasLt.so (unversioned) and the CUDA 12 sonames; a CUDA 13 toolkit or PyTorch's wheel
# may ship only libcublasLt.so.13. Links the first one found into a private folder.
_cl=$(ls /usr/local/cuda/lib64/libcublasLt.so /usr/local/cuda/lib64/libcublasLt.so.* \
  $(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia/*/lib/libcublasLt.so* 2>/dev/null | head -1)
if [ -n "$_cl" ]; then
  _d=$(mktemp -d); ln -s "$_cl" "$_d/libcublasLt.so"
  for f in $(dirname "$_cl")/libcublas.so*; do [ -e "$f" ] && ln -sf "$f" "$_d/libcublas.so" && break; done
  export LD_LIBRARY_PATH=$_d:$(dirname "$_cl")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "== cuBLASLt: $_cl"
else
  echo "== cuBLASLt: not found"
fi
