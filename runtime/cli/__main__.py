from interlock.runtime.cli import main

main()
