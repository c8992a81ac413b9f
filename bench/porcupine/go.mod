// The porcupine side of bench/porcupine_compare.py. porcupine is not vendored: the
// benchmark copies this folder to a build directory outside the repository and adds
// `replace github.com/anishathalye/porcupine => $PORCUPINE_SRC` there before building
// with GOPROXY=off (porcupine needs nothing beyond the standard library).
module etcdspec/bench/porcupine

go 1.19

require github.com/anishathalye/porcupine v0.0.0-00010101000000-000000000000
