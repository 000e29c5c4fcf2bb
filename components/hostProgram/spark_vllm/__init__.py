# spark-vllm's helper program as modules. Shipped joined into one file by
# components/plan/toolsProgram.ts; see components/hostProgram/README.md.
