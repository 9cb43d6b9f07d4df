# Which of the update's frames pay for their compile (learner.compile_pieces), ~6 min:
#   bash bench/gpu/pieces.sh
# 1. the compile alone, cold, of all frames (the config), of none, and of each unit alone
#    (compile_proc.py UNITS: inputs+target, the actor's, the critic's, both Adams), each in a
#    fresh process with empty caches (bench/compile_profile.py: prepare_s, frames, the phases);
# 2. what leaving units eager costs at run time: the compiled update's updates/s at batch 1024
#    with every frame, without inputs+target, without the Adams (bench/learner.py --set).
# A unit whose compile costs seconds and whose eager run costs little is one to leave out.
source bench/gpu/setup.sh
OPT='compile_options={"triton.autotune_pointwise":false}'
timeout 300 python3 bench/compile_profile.py --no-warm \
  --arm 'none:learner.compile_pieces=[]' \
  --arm 'inputs_target:learner.compile_pieces=[inputs,target]' \
  --arm 'actor:learner.compile_pieces=[actor_pass,actor_loss]' \
  --arm 'critic:learner.compile_pieces=[critic_out,critic_loss]' \
  --arm 'adams:learner.compile_pieces=[adams]' \
  --out $OUT/compile-profile-pieces-nvidia-h200.json 2>&1 | tail -22
for arm in all no_inputs_target no_adams; do
  case $arm in
    all) pieces=null ;;
    no_inputs_target) pieces='[actor_pass,critic_out,critic_loss,actor_loss,adams]' ;;
    no_adams) pieces='[inputs,actor_pass,critic_out,target,critic_loss,actor_loss]' ;;
  esac
  learner_rate pieces-$arm 150 --set "$OPT" --set "compile_pieces=$pieces"
done
ls $OUT
