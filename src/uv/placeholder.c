/* Placeholder until the runtime lands; replaced by src/uv modules. */
int acp__uv_placeholder;
