/* Keeps the support library non-empty. */
int acp_test_support_placeholder;
