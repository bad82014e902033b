// Placeholder entry point until the CLI lands (replaced in the same session).
int main() { return 0; }
