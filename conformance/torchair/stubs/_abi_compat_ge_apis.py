"""Stand-in for torchair's compiled `torchair/core/_abi_compat_ge_apis`.

No Python code in torchair imports it: the C++ extensions load it to bridge GE API ABI versions. It exists here
only so that the extracted `core/` package has the same four modules as the wheel.
"""
