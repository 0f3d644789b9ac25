// Random-weight model generator (being built).
int main() { return 1; }
