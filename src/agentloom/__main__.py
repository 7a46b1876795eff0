from agentloom.cli import main

main()
