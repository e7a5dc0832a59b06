#!/usr/bin/env bash
# A short name for this machine's CPU, naming its results tree: zen4, zen3, ... or the model name.
model=$(grep -m1 "^model name" /proc/cpuinfo | cut -d: -f2 | xargs)
family=$(grep -m1 "^cpu family" /proc/cpuinfo | cut -d: -f2 | xargs)
cpu_model=$(grep -m1 "^model\s*:" /proc/cpuinfo | cut -d: -f2 | xargs)
case "$model" in
  *AMD*)
    # Family 25 (0x19) is Zen 3 up to model 0x0f, and 0x20-0x5f; Zen 4 at 0x10-0x1f and 0x60-0x7f.
    if [ "$family" = 25 ] && { [ "$cpu_model" -ge 16 ] && [ "$cpu_model" -le 31 ] || [ "$cpu_model" -ge 96 ]; }; then
      echo zen4
    elif [ "$family" = 25 ]; then echo zen3
    elif [ "$family" = 26 ]; then echo zen5
    else echo "amd-family$family"; fi ;;
  *) echo "$model" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-' ;;
esac
