# call 5 (session 16): run_c4.sh with C's state resumed into D, as run on the device:
sed -e 's#--resume $W/$V/state#--resume $W/C/state#' -e 's#\$W/C/drafter#$W/D/drafter#g' \
    -e 's#\$W/C/state --resume#$W/D/state --resume#' -e 's#D=\$W/C/drafter#D=$W/D/drafter#' \
    .gpu/next_c4.sh > /tmp/c5.sh; TM=6.9 LR=2e-4 bash /tmp/c5.sh
