from tcmp.cli import main

main()
