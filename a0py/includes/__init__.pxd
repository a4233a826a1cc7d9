# C declarations of the a0py core, one .pxd per csrc/ header (uvloop's
# `includes/` layout). This file only makes the folder a cimportable package.
