from knell.cli import main

main()
