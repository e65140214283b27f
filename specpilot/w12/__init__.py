"""W12: lossless 12-bit bf16 weight format (CPU reference; see docs/w12.md)."""
from .format import FORMAT_NAME, W12Tensor, bitwise_equal, decode, decode_swar, encode, encode_auto
from .convert import check, convert, load_w12

__all__ = ["FORMAT_NAME", "W12Tensor", "bitwise_equal", "decode", "decode_swar", "encode", "encode_auto",
           "check", "convert", "load_w12"]
