if [ "$X" = 1 ]; then A=( --a ); else A=( --b ); fi
B=$((2*3))
torchrun --nproc_per_node 8 pretrain_gpt.py ${A[@]} --num-layers $B
